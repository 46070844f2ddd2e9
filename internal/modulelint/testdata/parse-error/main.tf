variable "environment" {
  type = string

resource "terraform_data" "a" {}
