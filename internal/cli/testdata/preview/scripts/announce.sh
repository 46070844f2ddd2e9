#!/bin/sh
# Writes the greeting of the environment; never prints a var's value.
printf '%s from %s\n' "$GREETING" "$CAPTF_COMPONENT" > announced.txt
echo "announce: done"
