#!/bin/sh
# Writes the message of config/message.txt and the component's name.
printf '%s from %s\n' "$(cat config/message.txt)" "$CAPTF_COMPONENT" > announced.txt
echo "announce: done"
