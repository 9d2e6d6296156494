package server

// The Server's endpoints by concern, each a type of its own over the Server.

// statsHandlers are the node's stats: /stats/summary and /metrics/resource, from the runtime's and the machine's figures.
type statsHandlers struct{ *Server }

func (s *Server) statsh() statsHandlers { return statsHandlers{s} }

// logHandlers are containerLogs: the log file of a container attempt, read, followed, limited.
type logHandlers struct{ *Server }

func (s *Server) logh() logHandlers { return logHandlers{s} }

// logRotation are the containers' log rotation (containerLogMaxSize, containerLogMaxFiles).
type logRotation struct{ *Server }

func (s *Server) rot() logRotation { return logRotation{s} }

// streamHandlers are exec, attach, port-forward and run, through the runtime's streaming server.
type streamHandlers struct{ *Server }

func (s *Server) streams() streamHandlers { return streamHandlers{s} }
