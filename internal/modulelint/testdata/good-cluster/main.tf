terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
    legacy = "~> 1.0"
  }
}

variable "environment" {
  type = string
}

variable "api_token" {
  type      = string
  sensitive = true
}

variable "ssh_public_key" {
  type = string
}

variable "key_name" {
  type = string
}

resource "terraform_data" "network" {
  input = var.environment
  lifecycle {
    create_before_destroy = true
  }
}
