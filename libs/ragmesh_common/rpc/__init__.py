"""gRPC plumbing shared by every service: server bootstrap, interceptors, client channels."""
