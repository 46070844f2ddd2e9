output "health" {
  value = { state = "healthy" }
}
