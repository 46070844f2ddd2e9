resource "terraform_data" "a" {
  lifecycle {
    prevent_destroy = true
  }
}
