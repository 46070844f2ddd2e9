output "failure_domains" {
  value = [{ zone = "a" }]
}
