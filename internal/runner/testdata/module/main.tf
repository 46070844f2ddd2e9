# The module a runner Job's image would bundle at /captf/module.
variable "size" {
  type = string
}

variable "token" {
  type      = string
  sensitive = true
}

resource "terraform_data" "node" {
  input = { size = var.size, token = var.token }
}

output "size" {
  value = var.size
}
