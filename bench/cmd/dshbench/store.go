package main

import (
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/dshmount/dshmount/internal/policy/kv/etcdkv/etcdtest"
)

// runStores measures the agent operations over the control socket once
// with the default store (Badger in the state directory, store-badger) and
// once with a shared one (serve --store etcd://… on an etcd member started
// in this process on loopback, store-etcd), with the same flags otherwise:
// the price of distribution per guarded edit.
func runStores(c *runConfig, self, base string, res *Results) error {
	srv, err := etcdtest.Start(mkdir(base, "etcd-data"), etcdtest.Options{})
	if err != nil {
		return err
	}
	defer srv.Stop()
	reps, et := strconv.Itoa(c.Reps), c.EditTime.String()
	for _, store := range []struct{ name, flag string }{
		{"store-badger", ""},
		{"store-etcd", "etcd://" + srv.Endpoint() + "/bench"},
	} {
		src, mnt, state := mkdir(base, store.name+"-src"), mkdir(base, store.name+"-mnt"), mkdir(base, store.name+"-state")
		args := []string{"serve", "--state", state}
		if store.flag != "" {
			args = append(args, "--store", store.flag)
		}
		d, err := startDaemon(exec.Command(c.Dshmount, append(args, src, mnt)...), "ready mount=")
		if err != nil {
			return fmt.Errorf("dshmount serve (%s): %w", store.name, err)
		}
		logf("control socket, %s", store.name)
		res.Targets[store.name], err = driver(exec.Command(self, "socket", "--socket", filepath.Join(state, "run", "control.sock"),
			"--dir", src, "--target", store.name, "--reps", reps, "--edit-time", et))
		d.stop()
		if err != nil {
			return err
		}
	}
	return nil
}

// printStores is the table of runStores.
func printStores(w io.Writer, res *Results) {
	b, e := res.Targets["store-badger"], res.Targets["store-etcd"]
	if b == nil || e == nil {
		return
	}
	fmt.Fprintf(w, "\nagent operations by policy store (socket, durability fsync)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "agent op\tunit\tbadger\tetcd\tetcd/badger\t")
	for _, m := range b.Metrics {
		v := med(e, m.Name)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", m.Name, m.Unit, num(m.Median), num(v), ratio(v, m.Median))
	}
	tw.Flush()
}
