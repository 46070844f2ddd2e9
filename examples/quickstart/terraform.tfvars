environment = "demo"
replicas    = 2
