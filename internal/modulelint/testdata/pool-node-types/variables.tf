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

variable "captf_node_labels" {
  type = map(number)
}

variable "captf_node_taints" {
  type = list(string)
}
