resource "terraform_data" "a" {
  provisioner "local-exec" {
    command = "echo created"
  }
}
