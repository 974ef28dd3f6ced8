// Package agentreport is what every agent-peer (one per cilium release) shares: it drives a cilium
// agent's IPAM as the daemon does and reports every outcome on stdout as one JSON object a line, so
// that the tests read all releases the same way. It holds no cilium code; each release's main wraps
// that release's ipam.IPAM in an Allocator.
//
// Events:
//
//	{"event":"ready"}                                                    the allocator is configured
//	{"event":"allocated","owner":"router","ip":…,"mac":…,"interface":…,"gateway":…,"cidrs":[…]}
//	{"event":"allocation-error","owner":"pod-3","error":"…"}
//	{"event":"released","owner":"pod-3","ip":…} / {"event":"release-error","owner":…,"error":…}
//	{"event":"restore-finished"}, {"event":"dump","allocated":{ip:owner}}
//	{"event":"log","level":"info","msg":"…",…}                             what cilium's code logs at info or above
//
// Commands on stdin, one a line: `allocate <owner>`, `release <owner>`, `restore-finished` (what the
// daemon calls once endpoint restoration is over: only then does the agent publish its use and
// release), `dump`. Run returns when stdin closes.
package agentreport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// Allocation is what the agent hands the CNI for one IP (cilium's ipam.AllocationResult).
type Allocation struct {
	IP        string
	MAC       string
	Interface string
	Gateway   string
	CIDRs     []string
}

// Allocator is one release's agent IPAM, configured and ready.
type Allocator interface {
	// AllocateNext is IPAM.AllocateNextFamily (or its WithoutSyncUpstream form) for IPv4.
	AllocateNext(owner string, syncUpstream bool) (Allocation, error)
	Release(ip string) error
	RestoreFinished()
	Dump() map[string]string
}

// Reporter writes the events, one whole line at a time, from any goroutine.
type Reporter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// Stdout is the reporter every agent-peer writes its events with.
var Stdout = &Reporter{enc: json.NewEncoder(os.Stdout)}

// Emit writes one event.
func (r *Reporter) Emit(event map[string]interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(event)
}

// Log reports one record cilium's code logged.
func (r *Reporter) Log(level, message string, fields map[string]interface{}) {
	event := map[string]interface{}{}
	for key, value := range fields {
		event[key] = fmt.Sprint(value)
	}
	event["event"], event["level"], event["msg"] = "log", strings.ToLower(level), message
	r.Emit(event)
}

// Run allocates the router and the health IP as the daemon does (without upstream sync), then
// `pods` pod IPs as the CNI asks for them, then serves the commands of `input` until it closes.
func Run(allocator Allocator, pods int, input io.Reader) {
	agent := &session{allocator: allocator, ips: map[string]string{}}
	Stdout.Emit(map[string]interface{}{"event": "ready"})
	agent.allocate("router", false)
	agent.allocate("health", false)
	for i := 1; i <= pods; i++ {
		agent.allocate(fmt.Sprintf("pod-%d", i), true)
	}
	lines := bufio.NewScanner(input)
	for lines.Scan() {
		command, argument := splitCommand(lines.Text())
		switch command {
		case "allocate":
			agent.allocate(argument, true)
		case "release":
			agent.release(argument)
		case "restore-finished":
			allocator.RestoreFinished()
			Stdout.Emit(map[string]interface{}{"event": "restore-finished"})
		case "dump":
			Stdout.Emit(map[string]interface{}{"event": "dump", "allocated": allocator.Dump()})
		case "":
		default:
			Stdout.Emit(map[string]interface{}{"event": "command-error", "error": "unknown command " + command})
		}
	}
}

func splitCommand(line string) (command, argument string) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return "", ""
	}
	return fields[0], strings.Join(fields[1:], " ")
}

type session struct {
	allocator Allocator
	ips       map[string]string
}

func (s *session) allocate(owner string, syncUpstream bool) {
	if owner == "" {
		Stdout.Emit(map[string]interface{}{"event": "command-error", "error": "allocate needs an owner"})
		return
	}
	result, err := s.allocator.AllocateNext(owner, syncUpstream)
	if err != nil {
		Stdout.Emit(map[string]interface{}{"event": "allocation-error", "owner": owner, "error": err.Error()})
		return
	}
	s.ips[owner] = result.IP
	Stdout.Emit(map[string]interface{}{
		"event": "allocated", "owner": owner, "ip": result.IP, "mac": result.MAC,
		"interface": result.Interface, "gateway": result.Gateway, "cidrs": result.CIDRs,
	})
}

func (s *session) release(owner string) {
	ip, held := s.ips[owner]
	if !held {
		Stdout.Emit(map[string]interface{}{"event": "release-error", "owner": owner, "error": "owner holds no IP"})
		return
	}
	delete(s.ips, owner)
	if err := s.allocator.Release(ip); err != nil {
		Stdout.Emit(map[string]interface{}{"event": "release-error", "owner": owner, "error": err.Error()})
		return
	}
	Stdout.Emit(map[string]interface{}{"event": "released", "owner": owner, "ip": ip})
}
