"""Access control: who is calling and what they may do, asked at the edge before any work is done.

``ports`` holds the caller, the authenticator and rate-limiter ports and the embedded default
(authentication disabled); ``tokens`` the scopes and token format; ``token_store`` and
``corpus_access`` the PostgreSQL stores of tokens and grants; ``client_address`` who a request comes
from; ``ratelimit`` the Redis token buckets; ``adapters`` the token authenticator and Redis rate
limit behind the ports; ``metrics`` the rate-limit counter. Import from the submodules: this
package re-exports nothing, so that importing the ports never pulls in a database driver.
"""
