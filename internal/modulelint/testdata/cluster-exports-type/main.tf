output "exports" {
  value = "net-1"
}
