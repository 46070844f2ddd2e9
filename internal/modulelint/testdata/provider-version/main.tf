terraform {
  required_providers {
    aws = {
      source = "hashicorp/aws"
    }
    builtin = {
      source = "terraform.io/builtin/terraform"
    }
  }
}
