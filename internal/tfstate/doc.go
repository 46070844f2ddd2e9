// Package tfstate reads the state that terraform's and tofu's kubernetes
// backend keep in Secrets, and lays out captf's backups of it. It is pure:
// it takes plain Secret structs and bytes, imports no Kubernetes package,
// and never returns or logs a value of the state (only its serial,
// lineage, sizes, digests and one named output's string).
//
// What the backend does, measured with terraform 1.11.4 and tofu 1.12.6
// against a real kube-apiserver (see the tests and the restore report):
//
//   - The state is gzip'ed JSON. Its compressed bytes are stored under the
//     data key "tfstate" of the Secret tfstate-default-<suffix>, annotated
//     encoding=gzip and labelled tfstate=true, tfstateSecretSuffix=<suffix>,
//     tfstateWorkspace=default, app.kubernetes.io/managed-by=terraform.
//   - terraform splits compressed bytes of more than 1 MiB (1048576, the
//     API server's limit for a Secret's data) into chunks of exactly 1 MiB,
//     the last one shorter: chunk 0 in tfstate-default-<suffix>, chunk n in
//     tfstate-default-<suffix>-part-<n> (n from 1), each under "tfstate",
//     each with the same annotation and labels. 1048576 compressed bytes
//     still fit one Secret; 1048577 make a part-1 of 1 byte. Neither the
//     count nor the order is recorded in a label or annotation: terraform
//     lists the Secrets by the backend's labels and places each by the
//     number after "-part-" in its name. A gap (part-3 without part-2)
//     crashes terraform 1.11.4 (index out of range); a part Secret that
//     lost its labels is not read at all. When the state shrinks, terraform
//     deletes the part Secrets it no longer needs.
//   - tofu keeps one Secret and no parts. It stores compact JSON (terraform
//     indents). A state of more than 1 MiB compressed cannot be written:
//     the API server refuses the Secret ("data: Too long") and tofu saves
//     errored.tfstate locally.
//   - Both update the existing Secrets in place (read, set data, Update):
//     labels, annotations and ownerReferences that someone else added stay.
//     A part Secret terraform creates carries only the backend's labels and
//     annotation, so whoever labels the state must label new parts too.
//   - The lock is the Lease lock-tfstate-default-<suffix> (same labels). A
//     held lock has spec.holderIdentity = the lock ID and the annotation
//     app.terraform.io/lock-info = LockInfo's JSON, e.g.
//     {"ID":"6a826c08-…","Operation":"OperationTypeApply","Info":"",
//     "Who":"root@vm","Version":"1.11.4","Created":"2026-12-01T15:37:58.22Z",
//     "Path":""}, Who being user@hostname of the process that holds it and
//     Path always empty for this backend. Unlock clears both; the Lease stays.
//   - state push -force keeps the lineage and everything else byte for
//     byte but writes serial+1 whenever the backend held anything else (no
//     state, or another one; an older serial included); pushing the state
//     the backend already holds writes nothing. Without -force a push of a
//     lower serial is refused. state pull prints the stored JSON plus one
//     newline (terraform); it is not the stored bytes.
package tfstate
