# The module of the restore tests: its state holds blob twice (the input
# and output of terraform_data), so the blob's size sets the state's.
variable "blob" {
  type      = string
  sensitive = true
}

resource "terraform_data" "blob" {
  input = var.blob
}

resource "terraform_data" "other" {
  count = 2
  input = count.index
}
