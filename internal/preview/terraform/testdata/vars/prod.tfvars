name = "prod"
size = 3
