# A pool module: one captftest file per member under
# $CAPTF_TEST_PROVIDER_ROOT/<dir>, holding what the member was given and
# the bootstrap data as its secret. Its members' provider IDs (the files
# in that directory, whoever made them) go out in provider_ids, read by
# the manager from the state.
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

variable "captf_pool_name" {
  type = string
}

variable "captf_replicas" {
  type = number
}

variable "captf_failure_domains" {
  type = list(string)
}

variable "captf_node_labels" {
  type = map(string)
}

variable "captf_node_taints" {
  type = list(object({ key = string, value = string, effect = string }))
}

# The Kubernetes version of the pool's machines (the MachinePool
# template's spec.version), written in each member's file.
variable "captf_kubernetes_version" {
  type = string
}

variable "captf_bootstrap_data" {
  type      = string
  sensitive = true
}

resource "captftest_file" "member" {
  count     = var.captf_replicas
  directory = var.dir
  name      = "${var.captf_pool_name}-${count.index}.txt"
  content = jsonencode({
    zone    = try(var.captf_exports.zone, "")
    domains = var.captf_failure_domains
    labels  = var.captf_node_labels
    taints  = var.captf_node_taints
    version = var.captf_kubernetes_version
  })
  secret = var.captf_bootstrap_data
}

# replace_on_bootstrap adds a launch file named after the bootstrap data
# (its length): new bootstrap data replaces it, as it would a launch
# configuration that embeds it.
variable "replace_on_bootstrap" {
  type    = bool
  default = false
}

resource "captftest_file" "launch" {
  count     = var.replace_on_bootstrap ? 1 : 0
  directory = "${var.dir}-launch"
  name      = "launch-${length(var.captf_bootstrap_data)}.txt"
  content   = var.captf_pool_name
}

# The pool's placement follows its cluster's zone: a new zone replaces it
# (as a launch template in another subnet would be).
resource "captftest_file" "placement" {
  directory = "${var.dir}-placement"
  name      = "${try(var.captf_exports.zone, "none")}.txt"
  content   = var.captf_pool_name
}

output "provider_id" {
  value = "captftest:///${var.dir}/${var.captf_pool_name}"
}

# The members, as a cloud's module reads an autoscaling group's
# instances: every file in the directory, those an "autoscaler" (the test)
# made too.
data "captftest_directory" "members" {
  directory  = var.dir
  depends_on = [captftest_file.member]
}

output "provider_ids" {
  value = [for name in data.captftest_directory.members.names : "captftest:///${var.dir}/${name}"]
}

# member_addresses names each member's resource by its provider ID, so
# that deleting a member's Machine replaces that resource; off, the output
# is null and no member can be replaced.
variable "member_addresses" {
  type    = bool
  default = false
}

output "member_addresses" {
  value = var.member_addresses ? { for i, f in captftest_file.member : "captftest:///${var.dir}/${f.name}" => "captftest_file.member[${i}]" } : null
}
