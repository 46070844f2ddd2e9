variable "captf_exports" {}

variable "captf_pool_name" {
  type = string
}

variable "captf_replicas" {
  type = number
}

variable "captf_bootstrap_data" {
  type      = string
  sensitive = true
}

variable "captf_failure_domains" {
  type    = list(string)
  default = []
}

variable "captf_node_labels" {
  type    = map(string)
  default = {}
}

variable "captf_node_taints" {
  type = list(object({
    key    = string
    value  = string
    effect = string
  }))
  default = []
}
