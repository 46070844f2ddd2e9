# Applied first; sideeffects-next/main.tf then replaces this file so the
# next plan moves, forgets and imports.
resource "terraform_data" "old" {
  input = "moving"
}

resource "terraform_data" "gone" {
  input = "forgotten"
}
