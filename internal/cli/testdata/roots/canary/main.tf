# Every value here is a canary: none may appear in captf's own output, its
# report or any file it leaves in the root.
variable "secret" {
  type      = string
  sensitive = true
}

variable "plain" {
  type = string
}

variable "replicas" {
  type = number
}

resource "terraform_data" "app" {
  count = var.replicas
  input = {
    name   = "${var.plain}-${count.index}"
    secret = var.secret
  }
}

resource "terraform_data" "derived" {
  input = terraform_data.app[0].id
}

output "names" {
  value = [for a in terraform_data.app : a.input.name]
}

output "secret" {
  value     = var.secret
  sensitive = true
}
