# A machine module: a captftest file per machine under
# $CAPTF_TEST_PROVIDER_ROOT/<dir>, holding the bootstrap data as its
# secret, and a health file the tests edit. It leaves captf_failure_domain
# undeclared: the runner passes that optional variable only to a module
# that declares it.
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

variable "captf_exports" {
  type = any
}

variable "captf_machine_name" {
  type = string
}

variable "captf_control_plane" {
  type = bool
}

# The Kubernetes version the machine runs (its Machine's spec.version):
# a real module picks its image by it; this one writes it in the file.
variable "captf_kubernetes_version" {
  type = string
}

# omit_provider_id leaves the provider_id output null, which the state
# does not hold: a module that publishes no provider ID.
variable "omit_provider_id" {
  type    = bool
  default = false
}

# fail_apply makes every plan, so every apply, fail.
variable "fail_apply" {
  type    = bool
  default = false
}

resource "terraform_data" "fail" {
  count = var.fail_apply ? 1 : 0
  lifecycle {
    precondition {
      condition     = !var.fail_apply
      error_message = "fail_apply is set."
    }
  }
}

variable "captf_bootstrap_data" {
  type      = string
  sensitive = true
}

resource "captftest_file" "node" {
  directory = var.dir
  name      = "${var.captf_machine_name}.txt"
  content   = jsonencode({ zone = try(var.captf_exports.zone, ""), control_plane = var.captf_control_plane, version = var.captf_kubernetes_version })
  secret    = var.captf_bootstrap_data
}

resource "captftest_file" "health" {
  directory = var.dir
  name      = "${var.captf_machine_name}.health"
  content   = "running"
}

output "provider_id" {
  value = var.omit_provider_id ? null : "captftest:///${var.dir}/${var.captf_machine_name}"
}

output "addresses" {
  value = [
    { type = "Hostname", address = var.captf_machine_name },
    { type = "InternalIP", address = "10.0.0.${length(var.captf_machine_name)}" },
  ]
}

output "failure_domain" {
  value = try(var.captf_exports.zone, "zone-none")
}

output "health" {
  value = { state = captftest_file.health.content }
}
