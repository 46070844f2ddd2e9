variable "name" {
  type = string
}
variable "size" {
  type    = number
  default = 1
}
variable "secret" {
  type      = string
  sensitive = true
  default   = "none"
}
variable "extra" {
  type    = bool
  default = true
}
resource "terraform_data" "keep" {
  input = "steady"
}
resource "terraform_data" "config" {
  input = { name = var.name, size = var.size }
}
resource "terraform_data" "replaced" {
  input            = "fixed"
  triggers_replace = [var.name]
}
resource "terraform_data" "derived" {
  input = terraform_data.config.output
}
resource "terraform_data" "secret" {
  input = { token = var.secret, plain = "visible" }
}
resource "terraform_data" "extra" {
  count = var.extra ? 1 : 0
  input = "extra"
}
output "name" {
  value = var.name
}
output "size" {
  value = var.size
}
output "derived" {
  value = terraform_data.config.output
}
output "secret" {
  value     = var.secret
  sensitive = true
}
