package main

// clientCommands returns the verbs that talk to a running daemon.
func clientCommands() []command { return nil }
