// Command idp is a real OpenID provider for vmaas's tests: zitadel/oidc's
// OP (github.com/zitadel/oidc/v3/pkg/op), with that module's example
// storage, login and device pages, serving on loopback only. It registers
// one client allowed the device-authorization grant (RFC 8628), so
// `vmaas login --device` can be tested against it end to end.
//
// It prints "issuer URL" on its first line once it listens.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
)

func main() {
	clientID := flag.String("client-id", "vmaas-cli", "the device client's id")
	secret := flag.String("client-secret", "vmaas-cli-secret", "the device client's secret (HTTP Basic)")
	users := flag.String("users", "", "a JSON file of users (id -> user); the example's two users when empty")
	flag.Parse()

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "idp: listen:", err)
		os.Exit(1)
	}
	issuer := fmt.Sprintf("http://%s/", listener.Addr().String())

	storage.RegisterClients(storage.DeviceClient(*clientID, *secret))
	store := storage.NewUserStore(issuer)
	if *users != "" {
		if store, err = storage.StoreFromFile(*users); err != nil {
			fmt.Fprintln(os.Stderr, "idp: users:", err)
			os.Exit(1)
		}
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	router := exampleop.SetupServer(issuer, storage.NewStorage(store), logger, false)

	fmt.Printf("issuer %s\n", issuer)
	if err := http.Serve(listener, router); err != nil {
		fmt.Fprintln(os.Stderr, "idp: serve:", err)
		os.Exit(1)
	}
}
