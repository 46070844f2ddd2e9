release     = "1"
db_password = "CANARY-TF-SENSITIVE-9e4d"
