# A module whose provider configuration comes from a variable: root is
# where captftest keeps its files, as a region or an account would say
# where a cloud provider's resources are. Changing it replaces marker, a
# change the destructive-plan guard stops.
terraform {
  required_providers {
    captftest = {
      source  = "example.com/captf/captftest"
      version = "0.1.0"
    }
  }
}

variable "root" {
  type = string
}

provider "captftest" {
  root = var.root
}

resource "captftest_file" "a" {
  directory = "."
  name      = "a.txt"
  content   = "a"
}

resource "terraform_data" "marker" {
  triggers_replace = var.root
}
