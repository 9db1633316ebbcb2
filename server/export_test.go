package server

// SetJobStarted lets tests observe (and hold) a job once it holds its lock.
func (s *Scheduler) SetJobStarted(f func(name string)) { s.started = f }
