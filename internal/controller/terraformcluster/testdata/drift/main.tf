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

# mode replaces b; extra = false deletes e: changes the destructive-plan
# guard stops.
variable "mode" {
  type    = string
  default = "0644"
}

variable "extra" {
  type    = bool
  default = true
}

resource "captftest_file" "b" {
  directory = var.dir
  name      = "b.txt"
  content   = "b"
  mode      = var.mode
}

resource "captftest_file" "e" {
  count     = var.extra ? 1 : 0
  directory = var.dir
  name      = "e.txt"
  content   = "e"
}

# k cannot be destroyed: a change of kmode fails every plan.
variable "kmode" {
  type    = string
  default = "0644"
}

resource "captftest_file" "k" {
  directory = var.dir
  name      = "k.txt"
  content   = "k"
  mode      = var.kmode
  lifecycle {
    prevent_destroy = true
  }
}

# sleep > 0 makes the first apply take that long, to interrupt it.
variable "sleep" {
  type    = number
  default = 0
}

resource "terraform_data" "slow" {
  count = var.sleep > 0 ? 1 : 0
  provisioner "local-exec" {
    command = "sleep ${var.sleep}"
  }
}

# p cannot be created again while a directory stands where its secret
# goes: a remediation that creates it fails, leaving nothing tainted.
resource "captftest_file" "p" {
  directory = var.dir
  name      = "p.txt"
  content   = "p"
  secret    = "p"
}

# The health output reads h.txt as it really is after a refresh: a test
# edits it to move InfrastructureHealthy.
variable "health" {
  type    = string
  default = "running"
}

resource "captftest_file" "h" {
  directory = var.dir
  name      = "h.txt"
  content   = var.health
}

output "health" {
  value = { state = captftest_file.h.content }
}
