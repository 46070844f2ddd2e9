output "provider_id" {
  sensitive = true
}
