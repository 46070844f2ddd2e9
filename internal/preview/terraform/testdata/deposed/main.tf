# create_before_destroy with a provisioner that fails: the new object is
# left tainted and the old one deposed, so the next plan deletes a deposed
# object.
variable "generation" {
  type = number
}

variable "fail" {
  type    = bool
  default = false
}

resource "terraform_data" "cbd" {
  input            = "cbd"
  triggers_replace = [var.generation]
  lifecycle {
    create_before_destroy = true
  }
  provisioner "local-exec" {
    command = var.fail ? "exit 1" : "true"
  }
}
