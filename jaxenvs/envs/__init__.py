"""The built-in environments, registered under the default namespace."""

from jaxenvs.registration import register

register("GridWorld-v0", "jaxenvs.envs.grid_world:GridWorld", max_episode_steps=300, reward_threshold=1.0)
register("Maze-v0", "jaxenvs.envs.maze:Maze", max_episode_steps=250)
register("PointEnv-v0", "jaxenvs.envs.point_env:PointEnv", max_episode_steps=100)
register("HurdleRace-v0", "jaxenvs.envs.hurdle_race:HurdleRace", max_episode_steps=50)
register("Lottery-v0", "jaxenvs.envs.lottery:Lottery")
register("RockPaperScissors-v0", "jaxenvs.envs.rock_paper_scissors:RockPaperScissors")
register("TicTacToe-v0", "jaxenvs.envs.tic_tac_toe:TicTacToe")
register("ConnectFour-v0", "jaxenvs.envs.connect_four:ConnectFour")
register("KuhnPoker-v0", "jaxenvs.envs.kuhn_poker:KuhnPoker")
