"""The cluster pages of the web console: the dashboard, a cluster (configuration, agent
keys, the command that starts an agent), its agents, throughput, topics with a message
browser, consumer groups, jobs and security (SASL users, ACLs). ``urls`` lists them; the
project's ``console_urls`` includes it. Every cluster is found through the signed-in
person's organization (``lookup.cluster_or_404``), so another organization's is a 404.
"""
