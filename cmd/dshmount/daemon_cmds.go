package main

// daemonCommands returns the verbs that run or manage the daemon.
func daemonCommands() []command {
	return []command{serveCommand(), unmountCommand(), fsmonitorCommand()}
}
