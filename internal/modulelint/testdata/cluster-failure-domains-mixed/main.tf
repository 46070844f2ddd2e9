output "failure_domains" {
  value = ["a", { name = "b" }]
}
