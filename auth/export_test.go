package auth

// SetJobStarted lets tests observe (and hold) a job once it holds its lock.
func (s *Service) SetJobStarted(f func(name string)) { s.jobStarted = f }
