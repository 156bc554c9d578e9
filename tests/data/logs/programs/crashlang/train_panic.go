// A toy "model server" that dies the way ollama / k8s-operator Go programs do. Modes (os.Args[1]):
// nil (a nil pointer dereference), index (index out of range), panic (panic(error) from a
// goroutine), deadlock (every goroutine blocked: the runtime's fatal error), healthy (slog-style level=ERROR/WARN lines (written by hand: go1.19 has no log/slog) and a recovered panic; exits 0).
package main

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

type Model struct{ Layers []float32 }

func (m *Model) NumLayers() int { return len(m.Layers) }

func load(name string) *Model {
	if name == "missing" {
		return nil
	}
	return &Model{Layers: make([]float32, 4)}
}

func main() {
	mode := "healthy"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	for step := 0; step < 3; step++ {
		fmt.Printf("step %d loss %.4f\n", step, 2.0/float64(step+1))
	}
	switch mode {
	case "nil":
		m := load("missing")
		fmt.Println(m.NumLayers())
	case "index":
		m := load("ok")
		i := len(os.Args) + 8
		fmt.Println(m.Layers[i])
	case "panic":
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			panic(errors.New("llama runner process has terminated: exit status 2"))
		}()
		wg.Wait()
	case "deadlock":
		ch := make(chan int)
		<-ch
	default:
		fmt.Fprintln(os.Stderr, `time=2026-12-03T18:30:00.000Z level=WARN msg="gpu not found, falling back to cpu" error="no nvidia devices"`)
		func() {
			defer func() {
				if r := recover(); r != nil {
					fmt.Fprintf(os.Stderr, "time=2026-12-03T18:30:00.001Z level=ERROR msg=\"recovered from panic\" panic=%q\n", fmt.Sprint(r))
				}
			}()
			panic("retryable: connection reset")
		}()
		fmt.Println("serving: 3 requests done, 0 errors")
	}
}
