# The state every golden plan starts from.
resource "terraform_data" "updated" {
  input = { size = "small", keep = "same" }
}

resource "terraform_data" "replaced" {
  input            = "replaced"
  triggers_replace = "1"
}

resource "terraform_data" "deleted" {
  input = "deleted"
}

resource "terraform_data" "old_name" {
  input = "moved"
}

resource "terraform_data" "forgotten" {
  input = "forgotten"
}

output "changed" {
  value = "v1"
}

output "same" {
  value = "same"
}
