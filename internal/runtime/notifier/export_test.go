package notifier

// OnConnect sets, for the tests, what sees each new connection.
func OnConnect(n *Notifier, f func(Conn)) { n.onConnect = f }
