variable "db_password" {
  type = string
}

variable "client_secret" {
  type      = string
  sensitive = false
}
