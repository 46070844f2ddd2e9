# A cluster module that publishes exports to its machines and pools: the
# value the variable exports gives, whatever its type.
variable "exports" {
  type = any
}

output "exports" {
  value = var.exports
}
