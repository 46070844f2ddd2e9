resource "terraform_data" "new" {
  input = "moving"
}

moved {
  from = terraform_data.old
  to   = terraform_data.new
}

removed {
  from = terraform_data.gone
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
