# A module whose infrastructure can drift: captftest files under
# $CAPTF_TEST_PROVIDER_ROOT/<dir>, which the tests edit behind terraform's
# back.
terraform {
  required_providers {
    captftest = {
      source  = "example.com/captf/captftest"
      version = "0.1.0"
    }
  }
}

variable "dir" {
  type = string
}

variable "content" {
  type = string
}

resource "captftest_file" "a" {
  directory = var.dir
  name      = "a.txt"
  content   = var.content
}

resource "captftest_file" "b" {
  directory = var.dir
  name      = "b.txt"
  content   = "b"
}

# p cannot be created while the file fail-<dir> exists in the provider's
# root: a remediation that creates it again fails.
resource "captftest_file" "p" {
  directory = var.dir
  name      = "p.txt"
  content   = "p"
  provisioner "local-exec" {
    command = "test ! -e \"$CAPTF_TEST_PROVIDER_ROOT/fail-${var.dir}\""
  }
}
