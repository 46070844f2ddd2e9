variable "captf_exports" {
  type = object({ network_id = string })
}

variable "captf_machine_name" {
  type = string
}

variable "captf_failure_domain" {
  type    = string
  default = ""
}

variable "captf_control_plane" {
  type    = bool
  default = false
}

variable "captf_bootstrap_data" {
  type      = string
  sensitive = true
}

variable "captf_kubernetes_version" {
  type = number
}
