package kubectlcaptf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
)

func (o *options) reviewCommand() *cobra.Command {
	var allNamespaces, noBrowser bool
	var address string
	cmd := &cobra.Command{
		Use:   "review",
		Short: "Serve a page on this machine that lists the plans waiting for approval, shows each and approves it",
		Long: "review starts a web server on a loopback address with your kubeconfig, prints its URL and\n" +
			"opens your browser. The page lists the plans that wait for an approval (live), shows what one\n" +
			"changes, and approves it in your own name, as kubectl captf approve does. Every URL carries a\n" +
			"random token printed once; the server answers only to its own address. Stop it with Ctrl-C.",
		Example: "  kubectl captf review -A\n" +
			"  kubectl captf review -n infra --no-browser --address 127.0.0.1:8765",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.structured() {
				return fmt.Errorf("review serves pages: %s does not apply", o.outputFlag())
			}
			l, err := listenLoopback(address)
			if err != nil {
				return err
			}
			defer l.Close()
			ctx := cmd.Context()
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			if allNamespaces {
				ns = ""
			}
			user, err := whoami(ctx, c)
			if err != nil {
				return err
			}
			s, err := newReviewServer(c, ns, user, l.Addr().String(), o.now)
			if err != nil {
				return err
			}
			cfg, err := o.restConfig()
			if err != nil {
				return err
			}
			if s.cs, err = kubernetes.NewForConfig(cfg); err != nil {
				return fmt.Errorf("API client: %w", err)
			}
			if _, err := fmt.Fprintf(o.streams.Out, "Reviewing as %s at %s\n(the URL holds the token: do not share it; Ctrl-C stops the server)\n", user, s.URL()); err != nil {
				return err
			}
			if !noBrowser {
				if err := openBrowser(s.URL()); err != nil {
					fmt.Fprintf(o.streams.ErrOut, "Open the URL above in your browser (%v).\n", err)
				}
			}
			return serve(ctx, l, s.Handler())
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "list the plans of every namespace")
	cmd.Flags().BoolVar(&noBrowser, "no-browser", false, "print the URL only; do not open a browser")
	cmd.Flags().StringVar(&address, "address", "127.0.0.1:0", "the loopback address and port to listen on (port 0: any free port)")
	return cmd
}

// listenLoopback listens on address, which must be a loopback IP.
func listenLoopback(address string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("--address %q: %w", address, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("--address %q: the review page listens on a loopback IP only (127.0.0.1 or ::1)", address)
	}
	l, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", address, err)
	}
	return l, nil
}

// serve serves h on l until ctx ends, then stops it: the live pages'
// streams end with ctx.
func serve(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return fmt.Errorf("review server: %w", err)
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(stop); err != nil {
		return fmt.Errorf("stop the review server: %w", err)
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("review server: %w", err)
	}
	return nil
}

// openBrowser opens url in the desktop's browser.
func openBrowser(url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.Command("xdg-open", url)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
