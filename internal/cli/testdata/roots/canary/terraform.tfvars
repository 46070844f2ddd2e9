secret   = "CANARY-SENSITIVE-7f3a9c"
plain    = "CANARY-PLAIN-41d2e8"
replicas = 1
