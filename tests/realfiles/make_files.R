# Writes the R-written CSV files of tests/realfiles/data with R's own writers, as users' R
# scripts do. Run from this folder: Rscript make_files.R (R 4.2; the output is committed).
out <- "data"
w <- function(df, name, ...) write.csv(df, file.path(out, paste0(name, ".csv")), ...)

# Built-in data sets, written with write.csv's defaults: a first column of row names under an
# empty header (""), NA for missing values, every string and factor quoted.
w(airquality, "airquality")
w(iris, "iris")
w(mtcars, "mtcars")
w(ToothGrowth, "toothgrowth")
w(as.data.frame(ChickWeight), "chickweight")
w(as.data.frame(CO2), "co2")
w(USArrests, "usarrests")
w(quakes, "quakes")
w(as.data.frame(state.x77), "state_x77")
w(esoph, "esoph")
w(as.data.frame(Titanic), "titanic")
w(warpbreaks, "warpbreaks", row.names = FALSE)
w(women, "women", row.names = FALSE)

# Logicals, dates, date-times (R writes them with a space), NA in every type, quoted line
# breaks and quotes, non-ASCII text.
set.seed(7)
n <- 60
events <- data.frame(
  id = seq_len(n),
  flag = rep(c(TRUE, FALSE, NA), length.out = n),
  day = as.Date("2020-02-27") + (seq_len(n) - 1) %% 5,
  at = as.POSIXct("1912-04-15 00:45:00", tz = "UTC") + (seq_len(n) - 1) * 3601,
  score = round(rnorm(n), 3),
  label = rep(c("plain", "with, comma", "say \"hi\"", "line one\nline two", "Zürich", NA),
              length.out = n),
  stringsAsFactors = FALSE
)
events$score[c(4, 9)] <- NA
w(events, "events")

# A wide table: 250 numeric columns, named as R's data.frame() names them (X1..X250 after
# check.names), and no row names.
wide <- as.data.frame(matrix(round(runif(40 * 250) * 1000), nrow = 40))
w(wide, "wide", row.names = FALSE)
