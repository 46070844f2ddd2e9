# Provisioners that run at apply: keep's once, when it is created; a's when
# var.n creates it. Their commands hold canaries no error may show.
variable "n" {
  type = number
}

resource "terraform_data" "keep" {
  input = "keep"
  provisioner "local-exec" {
    command = "echo CANARY-KEEP-1 > ran-keep"
  }
}

resource "terraform_data" "a" {
  count = var.n
  input = "a"
  provisioner "local-exec" {
    command = "echo CANARY-A-1 > ran-a"
  }
}
