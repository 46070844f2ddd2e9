# The module a runner Job's image would bundle at /captf/module.
variable "size" {
  type = string
}

variable "token" {
  type      = string
  sensitive = true
}

# moving makes every plan differ from the last (a clock), so an approved
# plan is always stale by the time it is applied.
variable "moving" {
  type    = bool
  default = false
}

# fail adds a resource whose apply fails after a plan that succeeds.
variable "fail" {
  type    = bool
  default = false
}

resource "terraform_data" "hook" {
  count = var.fail ? 1 : 0
  provisioner "local-exec" {
    command = "exit 1"
  }
}

# label changes only an output.
variable "label" {
  type    = string
  default = ""
}

resource "terraform_data" "node" {
  input = { size = var.size, token = var.token }
}

resource "terraform_data" "clock" {
  input = var.moving ? plantimestamp() : "still"
}

output "size" {
  value = var.size
}

output "label" {
  value = var.label
}

# The Cluster API contract's endpoint, forwarded by the runner.
output "control_plane_endpoint_host" {
  value = "api.${var.label == "" ? "default" : var.label}.example.test"
}

output "control_plane_endpoint_port" {
  value = 6443
}

# The Cluster API contract's failure domains, forwarded by the runner: an
# entry without control_plane may hold control plane machines.
output "failure_domains" {
  value = [
    { name = "zone-b", control_plane = false, attributes = { rack = "2" } },
    { name = "zone-a", attributes = { rack = "1" } },
  ]
}

# zone replaces a resource when it changes (none while it is empty): what
# a pool's new exports may do.
variable "zone" {
  type    = string
  default = ""
}

resource "terraform_data" "zone" {
  count            = var.zone == "" ? 0 : 1
  triggers_replace = var.zone
}
