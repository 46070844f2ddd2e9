# One plan with every kind of change the fingerprint knows: create, update
# in place, replace, delete, import, move (with an update), forget, and an
# output change.
resource "terraform_data" "updated" {
  input = { size = "large", keep = "same" }
}

resource "terraform_data" "replaced" {
  input            = "replaced"
  triggers_replace = "2"
}

resource "terraform_data" "created" {
  input = "created"
}

moved {
  from = terraform_data.old_name
  to   = terraform_data.new_name
}

resource "terraform_data" "new_name" {
  input = "moved and updated"
}

removed {
  from = terraform_data.forgotten
  lifecycle {
    destroy = false
  }
}

import {
  to = terraform_data.imported
  id = "imported-id"
}

resource "terraform_data" "imported" {
}

output "changed" {
  value = "v2"
}

output "same" {
  value = "same"
}
